package forwarder

import (
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func kadmClient(cl *kgo.Client) *kadm.Client { return kadm.NewClient(cl) }
