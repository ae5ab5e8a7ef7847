package postgres

// BacklogQuery is backlogQuery, for the plan test.
const BacklogQuery = backlogQuery
