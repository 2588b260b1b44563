// Package membership is the cluster's gossip layer (hashicorp/memberlist).
package membership

import _ "github.com/hashicorp/memberlist"
