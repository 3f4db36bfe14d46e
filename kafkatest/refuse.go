package kafkatest

import "github.com/twmb/franz-go/pkg/kmsg"

// RefuseTxnOffsetCommit is a broker's answer refusing each partition of
// commit with the error code given, for a kfake control function to return
// (ControlKey of kmsg.TxnOffsetCommit): franz-go aborts the transaction on
// UNKNOWN_SERVER_ERROR.
func RefuseTxnOffsetCommit(commit *kmsg.TxnOffsetCommitRequest, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := commit.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range commit.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
