package schedule

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRetriable: the scheduler waits out what passes by itself (a broker
// that cannot be reached, a partition without a leader) and stops on what
// only the operator can fix.
func TestRetriable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("create topic x: unable to dial: %w", syscall.ECONNREFUSED), true},
		{fmt.Errorf("create topic x: %w", kerr.NotLeaderForPartition), true},
		{fmt.Errorf("create topic x: %w", kerr.TopicAuthorizationFailed), false},
		{permanent{errors.New("topic x has cleanup.policy=delete")}, false},
	} {
		if got := retriable(tt.err); got != tt.want {
			t.Errorf("retriable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
