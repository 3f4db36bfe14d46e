package main

import (
	"cmp"
	"log/slog"
	"runtime/debug"
	"strconv"

	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/forwarder"
)

// The soft memory limit serve gives Go's runtime is 3/2 of
// max-buffered-bytes: 96 MiB with the default 64 MiB, which a 128 MiB
// container holds with the binary, stacks and the runtime's own (with
// 8/5, 102 MiB, the peak RSS at 50,000 records/s was 130.6 MiB).
//
// Why a limit: max-buffered-bytes bounds the records held, and Go's heap
// grows to twice what the last collection found live before it collects
// again. Under a steady load every level a record passes through holds some
// at once, and what is live comes near the bound: at 20,000 records/s on
// Apache Kafka the peak RSS of serve was 168 MiB without a limit, 120 MiB
// with GOMEMLIMIT=100MiB, its lateness unchanged (docs/BENCHMARKS.md, "Sustained
// rate"). The limit makes the collector run sooner as the heap nears it,
// rather than let it double; it must stay well above what may be live, the
// bound plus the clients' own, or the collector would run without end (Go
// caps it at half the CPU then).
//
// Under the limit the collector runs when the heap has grown by gcPercent
// of what was live (GOGC), not 100: the limit bounds the peak on its own,
// and collecting twice as often below it only slowed the loops. kdelay
// bench sweep, Go's default against 200, alternated: p99 lateness less the
// floor's at 10,000 records/s 36-204 ms against 4-13 ms, at 20,000/s
// 221-5,028 ms against 43-188 ms, peak RSS 113 MB in both
// (docs/BENCHMARKS.md, "Collecting less often").
//
// Not with the embedded broker: its records share the heap, for as long as
// retention keeps them, and are not bounded by max-buffered-bytes.
//
// The limit rises later only if the schedules' index outgrows
// max-buffered-bytes, which covers it too (memory_index.go).

// gcPercent is the GOGC serve runs with under its memory limit.
const gcPercent = 200

// setMemoryLimit gives the runtime a soft memory limit of 3/2 of
// max-buffered-bytes and a GOGC of gcPercent, unless GOMEMLIMIT (gomemlimit,
// the variable's value) set a limit already or the broker is embedded, and
// logs which applies. GOGC (gogc) set keeps its value. It returns the limit
// it set, 0 if none.
func setMemoryLimit(cfg config.Config, gomemlimit, gogc string, log *slog.Logger) int64 {
	switch {
	case gomemlimit != "":
		log.Info("memory_limit", "source", "GOMEMLIMIT", "bytes", debug.SetMemoryLimit(-1))
		return 0
	case cfg.Embedded():
		log.Info("memory_limit", "source", "none: the embedded broker's records share the heap")
		return 0
	default:
		limit := cmp.Or(cfg.MaxBufferedBytes, forwarder.DefaultMaxBufferedBytes) * 3 / 2
		debug.SetMemoryLimit(limit)
		if gogc == "" {
			debug.SetGCPercent(gcPercent)
			gogc = strconv.Itoa(gcPercent)
		}
		log.Info("memory_limit", "source", "max-buffered-bytes", "bytes", limit, "gogc", gogc)
		return limit
	}
}
