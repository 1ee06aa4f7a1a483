#!/usr/bin/env bash
# Fetches Spark's Kafka connector, with which samzapy.spark writes DataFrames to Kafka, from
# Maven Central into a cache directory. pyspark itself comes from pip (the `dev` extra).
#
#   scripts/spark.sh fetch    download the jars if needed; print the directory that holds them
#
# Environment (all optional):
#   SAMZAPY_CACHE   jar cache; jars go to $SAMZAPY_CACHE/spark-kafka-<version>/ (~/.cache/samzapy)
#   SPARK_VERSION   Spark version to fetch (default: <spark.version> in spark/pom.xml); samzapy.spark
#                   sets it to the installed pyspark's version
#
# Only the directory is printed on stdout, so callers can read it; progress goes to stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$ROOT/spark/pom.xml"

die() {
    echo "spark.sh: $*" >&2
    exit 1
}
say() { echo "spark.sh: $*" >&2; }

pom_version() {
    sed -n 's:.*<spark.version>\(.*\)</spark.version>.*:\1:p' "$POM" | head -n 1
}

SPARK_VERSION="${SPARK_VERSION:-$(pom_version)}"
[[ -n "$SPARK_VERSION" ]] || die "no <spark.version> found in $POM"
CACHE="${SAMZAPY_CACHE:-$HOME/.cache/samzapy}"
LIB="$CACHE/spark-kafka-$SPARK_VERSION"
CONNECTOR="spark-sql-kafka-0-10_2.13-$SPARK_VERSION.jar"

# The jars land in a temporary directory first, and a marker is written last, so an interrupted
# download is never mistaken for a complete one and two concurrent fetches do not mix their files.
fetch() {
    if [[ -f "$LIB/.complete" ]]; then
        echo "$LIB"
        return 0
    fi
    command -v mvn >/dev/null ||
        die "mvn not found: install Apache Maven to fetch Spark's Kafka connector $SPARK_VERSION"
    local tmp="$LIB.tmp.$$"
    rm -rf "$tmp"
    say "fetching Spark's Kafka connector $SPARK_VERSION from Maven Central into $LIB"
    mkdir -p "$(dirname "$LIB")"
    local mvn_log="$tmp.log"
    if ! mvn -q -B -f "$POM" dependency:copy-dependencies \
        -Dspark.version="$SPARK_VERSION" -DoutputDirectory="$tmp" >"$mvn_log" 2>&1; then
        cat "$mvn_log" >&2
        rm -rf "$tmp"
        die "Maven could not fetch Spark's Kafka connector $SPARK_VERSION" \
            "(its output is above and in $mvn_log)"
    fi
    rm -f "$mvn_log"
    [[ -f "$tmp/$CONNECTOR" ]] || die "Maven finished but $tmp/$CONNECTOR is missing"
    touch "$tmp/.complete"
    if [[ -d "$LIB" && ! -f "$LIB/.complete" ]]; then
        rm -rf "$LIB" # an interrupted earlier attempt
    fi
    mv -T "$tmp" "$LIB" 2>/dev/null || rm -rf "$tmp" # lost a race with another fetch: keep theirs
    [[ -f "$LIB/.complete" ]] || die "fetch did not leave a complete $LIB"
    say "Spark's Kafka connector $SPARK_VERSION ready in $LIB ($(du -sh "$LIB" | cut -f1))"
    echo "$LIB"
}

case "${1:-}" in
fetch) fetch ;;
*)
    echo "usage: scripts/spark.sh fetch" >&2
    exit 2
    ;;
esac
