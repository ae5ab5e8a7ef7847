package scenario

// WaitStored is waitStored for the scenarios written in package
// scenario_test (the hostile rows).
var WaitStored = waitStored
