// Command cron-fire is the target of the crons' EventBridge schedules: it
// fires one cron's slot (a normal run) and moves its schedule to the next
// (internal/lambdaapp.HandleCronEvent).
package main

import "github.com/stepgraph/stepgraph/internal/lambdaapp"

func main() { lambdaapp.StartCronFire() }
