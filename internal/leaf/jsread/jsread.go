// Package jsread reads messages from a JetStream stream's leader.
//
// Once a stream allows direct gets (AllowDirect: every KV bucket, and
// LLMW_EVENTS, LLMW_TOOLRESULTS and LLMW_TRANSCRIPTS), nats.go reads with them: kv.Get and
// Stream.GetLastMsgForSubject send $JS.API.DIRECT.GET, which any replica
// of the stream may answer, with what it has. A replica that is behind
// answers with an old value or none at all: right after a partition heals
// the node that was cut off keeps answering from what it had until it
// caught up, and a client connected to that node gets its answers first.
// That is fine for a read that only waits for something to appear, not
// for one a decision follows — a write expecting the revision read (which
// then conflicts, and conflicts again at every retry that reads there), or
// running a tool whose result seems to be missing.
//
// LastMsg asks the stream's message get API ($JS.API.STREAM.MSG.GET),
// which only the stream's leader answers.
package jsread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// LastMsg returns the last message of subject in stream as the stream's
// leader has it; jetstream.ErrMsgNotFound when the subject has none,
// a *jetstream.APIError for any other refusal (a missing stream). ctx
// bounds the request.
func LastMsg(ctx context.Context, nc *nats.Conn, apiPrefix, stream, subject string) (*jetstream.RawStreamMsg, error) {
	return get(ctx, nc, apiPrefix, stream, map[string]any{"last_by_subj": subject})
}

// SeqMsg returns message seq of stream as the stream's leader has it;
// jetstream.ErrMsgNotFound when the stream holds none at seq.
func SeqMsg(ctx context.Context, nc *nats.Conn, apiPrefix, stream string, seq uint64) (*jetstream.RawStreamMsg, error) {
	return get(ctx, nc, apiPrefix, stream, map[string]any{"seq": seq})
}

func get(ctx context.Context, nc *nats.Conn, apiPrefix, stream string, body map[string]any) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	m, err := nc.RequestWithContext(ctx, apiPrefix+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, err
	}
	var r struct {
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Hdrs    []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return nil, fmt.Errorf("jsread: answer of %s to a message get: %q: %w", stream, m.Data, err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, r.Error
	}
	if r.Message == nil {
		return nil, fmt.Errorf("jsread: answer of %s to a message get: %w", stream, errEmpty)
	}
	out := &jetstream.RawStreamMsg{Subject: r.Message.Subject, Sequence: r.Message.Seq, Data: r.Message.Data, Time: r.Message.Time}
	if len(r.Message.Hdrs) > 0 {
		if out.Header, err = nats.DecodeHeadersMsg(r.Message.Hdrs); err != nil {
			return nil, fmt.Errorf("jsread: headers of message %d of %s: %w", r.Message.Seq, stream, err)
		}
	}
	return out, nil
}

var errEmpty = errors.New("neither a message nor an error")

// APIPrefix is the JetStream API prefix js sends its requests with
// (jetstream.New, NewWithAPIPrefix or NewWithDomain), ending in a dot.
func APIPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix == "":
		return jetstream.DefaultAPIPrefix
	case !strings.HasSuffix(o.APIPrefix, "."):
		return o.APIPrefix + "."
	}
	return o.APIPrefix
}

// KVLast returns the current entry of key in the KV bucket as the
// leader of its stream has it: the message's data, and its sequence as
// the revision; jetstream.ErrKeyNotFound when the key has none, or was
// deleted, purged or expired (what kv.Get returns then).
func KVLast(ctx context.Context, nc *nats.Conn, apiPrefix, bucket, key string) ([]byte, uint64, error) {
	m, err := kvLast(ctx, nc, apiPrefix, bucket, key)
	if err != nil {
		return nil, 0, err
	}
	return m.Data, m.Sequence, nil
}

func kvLast(ctx context.Context, nc *nats.Conn, apiPrefix, bucket, key string) (*jetstream.RawStreamMsg, error) {
	m, err := LastMsg(ctx, nc, apiPrefix, "KV_"+bucket, "$KV."+bucket+"."+key)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, jetstream.ErrKeyNotFound
	}
	if err != nil {
		return nil, err
	}
	if m.Header.Get("KV-Operation") != "" || m.Header.Get(jetstream.MarkerReasonHeader) != "" {
		return nil, jetstream.ErrKeyNotFound
	}
	return m, nil
}

// KeyValue returns kv, a bucket opened through js, with a Get (of a key's
// current value) that asks the leader of the bucket's stream, as KVLast
// does; every other method is kv's own. For a bucket whose reads by key
// decide writes that cannot conflict, such as skipping a write because
// the value is stored already.
func KeyValue(js jetstream.JetStream, kv jetstream.KeyValue) jetstream.KeyValue {
	return &leaderKV{KeyValue: kv, nc: js.Conn(), apiPrefix: APIPrefix(js)}
}

type leaderKV struct {
	jetstream.KeyValue
	nc        *nats.Conn
	apiPrefix string
}

var _ jetstream.KeyValue = (*leaderKV)(nil)

func (kv *leaderKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	m, err := kvLast(ctx, kv.nc, kv.apiPrefix, kv.Bucket(), key)
	if err != nil {
		return nil, err
	}
	return &entry{bucket: kv.Bucket(), key: key, msg: m, op: jetstream.KeyValuePut}, nil
}

// KVRevision returns revision rev of key in the KV bucket as the leader
// of its stream has it (a put, or the delete or purge marker stored at
// rev); jetstream.ErrKeyNotFound when rev is not key's or is gone. What
// kv.GetRevision returns, without a replica that is behind answering
// that a revision the leader holds does not exist.
func KVRevision(ctx context.Context, nc *nats.Conn, apiPrefix, bucket, key string, rev uint64) (jetstream.KeyValueEntry, error) {
	m, err := SeqMsg(ctx, nc, apiPrefix, "KV_"+bucket, rev)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, jetstream.ErrKeyNotFound
	}
	if err != nil {
		return nil, err
	}
	if m.Subject != "$KV."+bucket+"."+key {
		return nil, jetstream.ErrKeyNotFound
	}
	op := jetstream.KeyValuePut
	switch m.Header.Get("KV-Operation") {
	case "DEL":
		op = jetstream.KeyValueDelete
	case "PURGE":
		op = jetstream.KeyValuePurge
	}
	return &entry{bucket: bucket, key: key, msg: m, op: op}, nil
}

// entry is a key's value as the leader has it.
type entry struct {
	bucket, key string
	msg         *jetstream.RawStreamMsg
	op          jetstream.KeyValueOp
}

var _ jetstream.KeyValueEntry = (*entry)(nil)

func (e *entry) Bucket() string                  { return e.bucket }
func (e *entry) Key() string                     { return e.key }
func (e *entry) Value() []byte                   { return e.msg.Data }
func (e *entry) Revision() uint64                { return e.msg.Sequence }
func (e *entry) Created() time.Time              { return e.msg.Time }
func (e *entry) Delta() uint64                   { return 0 }
func (e *entry) Operation() jetstream.KeyValueOp { return e.op }
