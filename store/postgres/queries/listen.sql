{{/*
listen: this connection receives the notifications on .Channel (quoted).
*/ -}}
LISTEN {{.Channel}}
