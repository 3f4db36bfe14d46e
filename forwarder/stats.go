package forwarder

// Stats counts what a Forwarder did since it started.
type Stats struct {
	Delivered    int64 // records their target acknowledged, once each
	Hopped       int64 // records produced to a level topic
	Held         int64 // remainders below the smallest level held until due
	DeadLettered int64 // records produced to the DLQ
	Retried      int64 // produces that failed and were tried again
	Aborted      int64 // transactions aborted, whose records were taken again (exactly-once)
	Cancelled    int64 // records not delivered because a cancel command names them
	PastDue      int64 // records written to the ingress already past their due time, delivered at once
	HandedBack   int64 // records held in memory written back to the ingress as their partition moved or the process stopped
}

func (s *Stats) add(o Stats) {
	s.Delivered += o.Delivered
	s.Hopped += o.Hopped
	s.Held += o.Held
	s.DeadLettered += o.DeadLettered
	s.Retried += o.Retried
	s.Aborted += o.Aborted
	s.Cancelled += o.Cancelled
	s.PastDue += o.PastDue
	s.HandedBack += o.HandedBack
}
