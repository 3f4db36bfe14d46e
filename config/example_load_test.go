package config_test

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/kdelay/kdelay/config"
)

func ExampleLoad() {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.AddFlags(fs)
	_ = fs.Parse([]string{"--levels", "1s,5s", "--check-interval", "50ms"})

	cfg, err := config.Load(fs, []string{"KDELAY_MODE=poll"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Levels.Names(), cfg.CheckInterval, cfg.Mode, cfg.Seeds())
	// Output: [1s 5s] 50ms poll [127.0.0.1:9092]
}

func ExampleLoad_invalid() {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.AddFlags(fs)
	_ = fs.Parse([]string{"--partitions", "0"})

	_, err := config.Load(fs, []string{"KDELAY_CHECK_INTERVAL=10x"})
	fmt.Println(err)
	// Output:
	// partitions: 0 is out of range; use at least 1 (from --partitions)
	// check-interval: "10x" is not a Go duration such as 100ms (from KDELAY_CHECK_INTERVAL)
}
