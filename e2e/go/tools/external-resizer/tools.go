//go:build tools

// Package tools keeps upstream's external-resizer main packages in the module graph.
package tools

import (
	_ "github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer"
)
