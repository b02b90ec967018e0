package shard

// maxClassID for the external tests.
const MaxClassID = maxClassID
