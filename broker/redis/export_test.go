package redisbroker

// DelayedKey is delayedKey, for the tests of package redisbroker_test.
var DelayedKey = delayedKey
