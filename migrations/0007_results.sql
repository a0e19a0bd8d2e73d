-- Results are addressable by id (GET /v1/results/{result_id}).
CREATE INDEX calls_result ON calls (result_id) WHERE result_id IS NOT NULL;
