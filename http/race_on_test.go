//go:build race

package http_test

// raceOn reports a -race build, where SQLite writes are ~50 times slower.
const raceOn = true
