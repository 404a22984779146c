package sample

import (
	"runtime"

	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

func hostArchitecture() ltypes.Architecture {
	if runtime.GOARCH == "arm64" {
		return ltypes.ArchitectureArm64
	}
	return ltypes.ArchitectureX8664
}
