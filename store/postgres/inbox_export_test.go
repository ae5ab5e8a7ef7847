package postgres

// InboxKey is inboxKey, for the plan test.
const InboxKey = inboxKey
