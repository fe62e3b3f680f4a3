-- Two clusters clash when they claim the same worker id of the same layout at overlapping
-- times; so do two servers of one cluster at two places that both go on (0.6.0: a copy of its
-- data directory, or a split brain), whose `place` and `other_place` then differ. A worker id reused after its first cluster stopped (a replaced server, a pg_upgrade,
-- which gives a new system identifier) does not clash: the claims do not overlap. A clash stays
-- listed after it ended (ids of that time may be equal), with ongoing false: monitoring alerts
-- on `WHERE ongoing`, and deleting a stale claim clears its history.
--
-- A view runs with its owner's rights and binds its operators when it is created: every one is
-- named by schema, so that none can be one a less privileged role planted on the search_path.
-- mutant: claims_followed_view
CREATE VIEW snowflake.snowflake_clashes AS
SELECT a.worker_id, a.layout,
       a.node_name, a.system_identifier,
       b.node_name AS other_node_name, b.system_identifier AS other_system_identifier,
       greatest(a.since, b.since) AS since,
       least(a.expires, b.expires) AS until,
       least(a.expires, b.expires) OPERATOR(pg_catalog.>) pg_catalog.now() AS ongoing,
       a.place, b.place AS other_place
  FROM snowflake.snowflake_claims a
  JOIN snowflake.snowflake_claims b
    ON b.worker_id OPERATOR(pg_catalog.=) a.worker_id
   AND b.layout OPERATOR(pg_catalog.=) a.layout
   -- Each pair once, in the order of the node names.
   AND (b.node_name, b.system_identifier, b.place) OPERATOR(pg_catalog.>)
       (a.node_name, a.system_identifier, a.place)
   AND a.since OPERATOR(pg_catalog.<) b.expires
   AND b.since OPERATOR(pg_catalog.<) a.expires
   -- One cluster at two places: only while each was seen after the other began (a standby
   -- promoted after its primary's last claim follows it, and clashes with none).
   AND (a.system_identifier OPERATOR(pg_catalog.<>) b.system_identifier
        OR (a.last_seen OPERATOR(pg_catalog.>) b.since
            AND b.last_seen OPERATOR(pg_catalog.>) a.since));
