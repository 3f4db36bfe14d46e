package main

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEmbeddedBrokerSessionTimeouts: the embedded broker allows a group the
// session timeouts Apache Kafka allows by default, 6s to 30m
// (group.min.session.timeout.ms, group.max.session.timeout.ms), so that
// what works on it works on a cluster and the other way round; kfake's own
// maximum is 5m.
func TestEmbeddedBrokerSessionTimeouts(t *testing.T) {
	t.Parallel()
	b := startTestBroker(t, embeddedConfig(t), time.Hour)
	defer b.Close()
	for _, tt := range []struct {
		session time.Duration
		allowed bool
	}{{2 * time.Second, false}, {6 * time.Second, true}, {10 * time.Minute, true}, {30 * time.Minute, true}, {31 * time.Minute, false}} {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.ProtocolType = "session-"+tt.session.String(), "consumer"
		req.SessionTimeoutMillis = int32(tt.session.Milliseconds())
		req.RebalanceTimeoutMillis = req.SessionTimeoutMillis
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky"}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := req.RequestWith(ctx, b.client)
		cancel()
		if err != nil {
			t.Fatalf("join with session timeout %s: %v", tt.session, err)
		}
		refused := resp.ErrorCode == kerr.InvalidSessionTimeout.Code
		if refused == tt.allowed {
			t.Errorf("join with session timeout %s: %v, want allowed %v", tt.session, kerr.ErrorForCode(resp.ErrorCode), tt.allowed)
		}
	}
}
