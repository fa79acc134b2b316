//go:build tools

// Package tools keeps the csi-sanity main package in the module graph.
package tools

import _ "github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity"
