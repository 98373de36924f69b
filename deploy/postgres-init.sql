-- Run by the postgres image on its first start (an empty data volume): the catalog's database,
-- beside Dagster's (POSTGRES_DB), owned by the same role.
CREATE DATABASE rag_catalog OWNER rag;
