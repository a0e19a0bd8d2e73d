-- The DAARION platforms beside GREENFOOD: EnergyUnion meters and Water Union meters and
-- valves. Meters and valves belong to a team; readings are what each meter reported.
CREATE TABLE platform_meters (
    meter_id    text PRIMARY KEY CHECK (meter_id ~ '^[a-z][a-z0-9_-]{0,63}$'),
    platform    text NOT NULL CHECK (platform IN ('energy', 'water')),
    team_id     text NOT NULL,
    label       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX platform_meters_team ON platform_meters (team_id, platform);

CREATE TABLE platform_readings (
    meter_id  text NOT NULL REFERENCES platform_meters (meter_id) ON DELETE CASCADE,
    at        timestamptz NOT NULL,
    value     numeric(14, 3) NOT NULL CHECK (value >= 0),  -- kWh or litres over the interval ending at `at`
    PRIMARY KEY (meter_id, at)
);

CREATE TABLE platform_valves (
    valve_id    text PRIMARY KEY CHECK (valve_id ~ '^[a-z][a-z0-9_-]{0,63}$'),
    team_id     text NOT NULL,
    meter_id    text REFERENCES platform_meters (meter_id),
    open        boolean NOT NULL DEFAULT true,
    updated_by  text,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Demo data for the quick start's team: two energy meters, one water meter and its valve,
-- with hourly readings over the 14 days before the migration ran (a daily curve).
INSERT INTO platform_meters (meter_id, platform, team_id, label) VALUES
    ('em-001', 'energy', 'team-1', 'EnergyUnion: greenhouse A'),
    ('em-002', 'energy', 'team-1', 'EnergyUnion: cold store'),
    ('wm-001', 'water',  'team-1', 'Water Union: irrigation main');
INSERT INTO platform_valves (valve_id, team_id, meter_id, open) VALUES
    ('wv-001', 'team-1', 'wm-001', true);
INSERT INTO platform_readings (meter_id, at, value)
SELECT m.meter_id, t,
       round((m.base + m.amp * (1 + sin(2 * pi() * extract(hour FROM t AT TIME ZONE 'UTC') / 24)))::numeric, 3)
FROM (VALUES ('em-001', 1.2, 0.8), ('em-002', 3.5, 0.4), ('wm-001', 40.0, 35.0))
         AS m(meter_id, base, amp),
     generate_series(date_trunc('hour', now()) - interval '14 days', date_trunc('hour', now()),
                     interval '1 hour') AS t;
