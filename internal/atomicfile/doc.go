// Package atomicfile writes small files so that a crash leaves either the old content or the
// new one, never a mix: the node's catalog cache and hosted-replica list, and backup manifests.
package atomicfile
