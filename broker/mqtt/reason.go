package mqttbroker

// reasonName names the MQTT 5 reason codes a refused CONNECT or PUBLISH
// comes back with, for error texts. A code means the same in every packet
// that carries it, so one table serves CONNACK and PUBACK.
var reasonName = map[byte]string{
	0x80: "unspecified error",
	0x81: "malformed packet",
	0x82: "protocol error",
	0x83: "implementation specific error",
	0x84: "unsupported protocol version",
	0x85: "client identifier not valid",
	0x86: "bad user name or password",
	0x87: "not authorized",
	0x88: "server unavailable",
	0x89: "server busy",
	0x8A: "banned",
	0x8B: "server shutting down",
	0x8C: "bad authentication method",
	0x90: "topic name invalid",
	0x91: "packet identifier in use",
	0x93: "receive maximum exceeded",
	0x95: "packet too large",
	0x96: "message rate too high",
	0x97: "quota exceeded",
	0x99: "payload format invalid",
	0x9F: "connection rate exceeded",
}
