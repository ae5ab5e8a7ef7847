package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Mosquitto is a mosquitto process of the test's own. Its configuration: a
// listener on 127.0.0.1:Port, anonymous access, persistence in Dir (saved
// on a clean shutdown and every second), unlimited queues per client, plus
// the lines given to StartMosquitto. Stop is a clean shutdown (it saves its
// store); Kill loses what changed since the last save.
type Mosquitto struct {
	*Process
	URL string // mqtt://127.0.0.1:Port
}

// MosquittoBinary finds mosquitto, or says it is missing.
func MosquittoBinary() (string, error) {
	return findBinary("mosquitto", "mosquitto", "/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto")
}

// StartMosquitto starts mosquitto and stops it when the test ends; without
// the binary the test is skipped (or fails under TXBOX_REQUIRE_SERVICES=1).
func StartMosquitto(t testing.TB, extraConf ...string) *Mosquitto {
	t.Helper()
	bin, err := MosquittoBinary()
	if err != nil {
		Missing(t, err.Error())
	}
	// Started as root, mosquitto drops to its own user, which must be able
	// to reach and write its store and log.
	dir := SharedDir(t, "txbox-mosquitto-", 0o777)
	conf := filepath.Join(dir, "mosquitto.conf")
	p := newProcess(t, "mosquitto", dir, func(int, string) []string { return []string{bin, "-c", conf} })
	lines := []string{
		fmt.Sprintf("listener %d 127.0.0.1", p.Port),
		"allow_anonymous true",
		"persistence true",
		"persistence_location " + dir + "/",
		"autosave_interval 1",
		"max_queued_messages 0",
		"max_inflight_messages 0",
		"log_dest file " + filepath.Join(dir, "mosquitto.log"),
		"log_type error",
		"log_type warning",
		"log_type notice",
	}
	if err := os.WriteFile(conf, []byte(strings.Join(append(lines, extraConf...), "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Mosquitto{Process: p, URL: "mqtt://127.0.0.1:" + strconv.Itoa(p.Port)}
	m.Start()
	return m
}

// Log is what mosquitto logged so far.
func (m *Mosquitto) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.Dir, "mosquitto.log"))
	return string(b)
}
