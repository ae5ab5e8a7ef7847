package webhookbroker

// Target is target, for the tests of package webhookbroker_test.
func (p *Publisher) Target(topic string) (string, error) { return p.target(topic) }
