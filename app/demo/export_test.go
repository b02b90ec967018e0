package demo

// What the external tests call that no other package does.

var StartRedis = startRedis

const (
	RedisServer = kindRedisServer
	Miniredis   = kindMiniredis
)
