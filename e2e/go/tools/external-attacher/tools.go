//go:build tools

// Package tools keeps upstream's external-attacher main package in the module graph.
package tools

import (
	_ "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"
)
