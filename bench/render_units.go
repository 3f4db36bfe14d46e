package bench

import (
	"strconv"
	"time"
)

// How the table and the chart write figures for a reader; benchfmt and
// JSON keep the raw numbers.

func count(n int64) string { return strconv.FormatInt(n, 10) }

// ms writes a lateness in milliseconds to the microsecond.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

func usageSeconds(u Usage, d time.Duration) string {
	if !u.Measured {
		return "-"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64)
}

func usageMB(u Usage, b int64) string {
	if !u.Measured {
		return "-"
	}
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64)
}

func percent(f float64) string {
	if f < 0 {
		return "unknown"
	}
	return strconv.FormatFloat(f*100, 'f', 2, 64) + "%"
}

func measuredOn(u Usage) string {
	switch {
	case !u.Measured:
		return "not measured"
	case u.Shared:
		return "whole benchmark process, broker included"
	default:
		return "forwarder process"
	}
}
