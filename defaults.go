package kdelay

import "time"

// DefaultMaxDelay is the longest delay kdelay accepts unless configured otherwise: 400 days.
const DefaultMaxDelay = 400 * 24 * time.Hour
