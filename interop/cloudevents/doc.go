// Package cloudevents holds tests only: what txbox's publishers send (NATS,
// Kafka, webhooks), and what `txbox relay` delivers from a row written with
// plain SQL, is decoded by the official CloudEvents Go SDK. It lives in the
// interop module so that the SDK and sarama stay out of txbox's go.mod.
package cloudevents
