-- OpenAPI services as upstreams (transport 'openapi'): `url` is the base URL calls go to; the
-- document is kept as read at registration, and re-read from `document_url` at each sync when
-- it was registered by URL.

ALTER TABLE upstreams
    ADD COLUMN document      jsonb,
    ADD COLUMN document_url  text,
    ADD CONSTRAINT upstreams_openapi_document
        CHECK ((transport = 'openapi') = (document IS NOT NULL OR document_url IS NOT NULL));
