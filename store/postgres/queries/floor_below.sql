{{/*
floorBelow: the look below the floor (floor.go): the lowest unsent id below
$1, which the claims' window does not see.
*/ -}}
SELECT (SELECT w.id FROM {{.Table}} w WHERE {{unsent "w"}} AND w.id < $1 ORDER BY w.id LIMIT 1)
