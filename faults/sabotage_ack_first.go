//go:build txbox_sabotage_ack_first

package faults

import "github.com/txbox/txbox/internal/sabotage"

// A deliberately broken build: deliveries are acknowledged before the inbox
// transaction committed. Never build releases with this tag.
func init() { consumerSubscriber = sabotage.AckFirst }
