//go:build tools

// Package tools keeps upstream's external-provisioner main packages in the module graph.
package tools

import (
	_ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
)
