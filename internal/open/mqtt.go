package open

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	mqttbroker "github.com/txbox/txbox/broker/mqtt"
)

var mqttFlags struct {
	clientID           string
	maxPayload         int
	requireSubscribers bool
	caFile             string
	keepAlive          time.Duration
}

func init() {
	registerPublisher(publisherDef{
		// tcp://, ssl:// and tls:// are MQTT too for the package, but the
		// binary leaves such generic schemes to no one (tls:// is NATS's).
		schemes: []string{"mqtt", "mqtts"},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&mqttFlags.clientID, "mqtt-client-id", "", "MQTT client id of the relay's connection (default txbox-relay-<random>); must differ between relays")
			f.IntVar(&mqttFlags.maxPayload, "mqtt-max-payload", 0, "fail payloads over this many bytes permanently (set it to the broker's message_size_limit); 0: only the broker's announced Maximum Packet Size")
			f.BoolVar(&mqttFlags.requireSubscribers, "mqtt-require-subscribers", false, "treat a publish that matched no subscription (PUBACK 0x10) as an outage: the event waits, spending no attempts, until a subscription exists")
			f.StringVar(&mqttFlags.caFile, "mqtt-ca-file", "", "PEM file of the CAs that sign the broker's certificate (mqtts://); default: system roots")
			f.DurationVar(&mqttFlags.keepAlive, "mqtt-keepalive", mqttbroker.DefaultKeepAlive, "MQTT keep-alive of the relay's connection")
		},
		check: checkMQTTFlags,
		open: func(ctx context.Context, raw string, log *slog.Logger) (broker.Publisher, error) {
			var tlsConf *tls.Config
			if mqttFlags.caFile != "" {
				pem, err := os.ReadFile(mqttFlags.caFile)
				if err != nil {
					return nil, &txbox.ConfigError{Field: flagField("mqtt-ca-file"), Reason: err.Error()}
				}
				pool := x509.NewCertPool()
				if !pool.AppendCertsFromPEM(pem) {
					return nil, &txbox.ConfigError{Field: flagField("mqtt-ca-file"), Reason: fmt.Sprintf("%s holds no PEM certificate", mqttFlags.caFile)}
				}
				tlsConf = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			}
			return mqttbroker.Open(ctx, raw, mqttbroker.Options{
				ClientID: mqttFlags.clientID, MaxPayload: mqttFlags.maxPayload, RequireSubscribers: mqttFlags.requireSubscribers,
				Connection: mqttbroker.Connection{TLSConfig: tlsConf, KeepAlive: mqttFlags.keepAlive, Logger: log},
			})
		},
	})
}

// checkMQTTFlags refuses bad numbers before anything connects.
func checkMQTTFlags() error {
	return cmp.Or(
		notNegative("mqtt-max-payload", mqttFlags.maxPayload, "want a number of bytes, or 0 for the broker's limit only"),
		notNegative("mqtt-keepalive", mqttFlags.keepAlive, ""),
	)
}
