//go:build !unix

package bench

import (
	"os"
	"time"
)

func selfCPU() time.Duration { return 0 }

func exitUsage(*os.ProcessState) (Usage, bool) { return Usage{}, false }
