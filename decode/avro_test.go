package decode

// avroReasons are the reasons the Avro tests cover.
var avroReasons = []Reason{ReasonUnknownSchema}
