package kafkabroker

// ParseBrokers is parseBrokers, for the tests of package kafkabroker_test.
var ParseBrokers = parseBrokers
