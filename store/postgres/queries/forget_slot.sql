{{/*
forgetSlot: the slot $1 leaves the registry.
*/ -}}
DELETE FROM {{.Slots}} WHERE slot_name = $1
