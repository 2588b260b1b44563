// Command schemaless runs and talks to a schemaless cluster: `serve` runs one node, `dev` a
// local cluster of node processes (optionally importing the sample flights), and `put`, `get`,
// `latest`, `import flights` and `status` are clients of the HTTP API. It is the project's only
// composition root: flags are parsed here and turned into the packages' configs.
package main
