{{/*
windowFull: whether the window of the $1 lowest unsent ids from $2 on is
full. A claim that took fewer rows than it asked for from a full window runs
its fallback: deliverable rows may lie beyond the window.
*/ -}}
SELECT count(*) = $1 FROM (SELECT 1 FROM {{.Table}} w WHERE {{unsent "w"}} AND w.id >= $2 ORDER BY w.id LIMIT $1) x
