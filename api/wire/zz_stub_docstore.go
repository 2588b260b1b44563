package wire

// TEMPORARY STUB (branch jepsen-docstore): the wire types of issue 18's conditional writes and
// partition transactions, as announced, until they land on main. Delete this file when merging
// main brings the real ones.

// ConditionFailure is one failed condition of a 412 answer: its index among the request's
// conditions, and the column's latest ref key (nil: the column has no cell).
type ConditionFailure struct {
	Index        int    `json:"index"`
	LatestRefKey *int64 `json:"latest_ref_key"`
}

// TransactionResponse is the answer of a committed transaction.
type TransactionResponse struct {
	Committed bool        `json:"committed"`
	Partition int         `json:"partition"`
	Results   []PutResult `json:"results"`
}
