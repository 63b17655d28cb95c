// Package media keeps the bytes of large image and file parts in the
// LLMW_MEDIA JetStream object store, addressed by their SHA-256, so that a
// transcript — written at every step into the checkpoint, the completion
// request and the session — carries a short ref instead of megabytes of
// base64 (docs/protocol.md §4, "Media").
//
// The services use it at the edges of a turn: the turn service, a gateway
// and the CLI Offload a request's inline parts above
// events.InlineMediaLimit when they accept it, toolexec offloads a tool
// result's, and ingest Resolves refs back into bytes when it builds the
// provider request. Nothing in between reads the bytes.
//
// A client uploads first and sends the ref with Store.Put, or without this
// package by putting the bytes into the bucket under the name of their
// hex SHA-256 digest (`nats object put LLMW_MEDIA FILE --name <hex>`) and
// sending {"type":"file","media_type":…,"ref":"sha256:<hex>"}.
package media
