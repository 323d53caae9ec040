"""tollgate-rls as a client that tollgate did not write sees it.

Python's grpcio, with the Envoy stubs that the gRPC project generates from Envoy's
protos (the `xds-protos` package), speaks to the running binary on loopback.

Run: python3 tollgate-rls/tests/python/rls_grpcio_test.py PATH/TO/tollgate-rls
(`pip install grpcio xds-protos` first; .ci/run does both.) With TOLLGATE_TEST_REDIS
set to a redis-server's `host:port`, the quota service is also tested over it, two
replicas sharing a bucket (tests/grpcio.rs starts one and sets it).
"""

import os
import queue
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

import grpc
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
from envoy.service.rate_limit_quota.v3 import rlqs_pb2, rlqs_pb2_grpc

BINARY = None

CONFIG = textwrap.dedent(
    """\
    domain: python
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 20 }
      - key: path
        value: /health
        rate_limit: { unlimited: true }
      - key: tier
        value: "gold*"
        rate_limit: { unit: Hour, requests_per_unit: 3, algorithm: gcra }
    """
)

LISTENING = re.compile(r"grpc=(\S+)\s+http=(\S+)")


class Server:
    """The binary, started on free loopback ports with a config directory."""

    def __init__(self, extra_env=None, extra_args=()):
        self.dir = tempfile.TemporaryDirectory()
        with open(os.path.join(self.dir.name, "python.yaml"), "w") as f:
            f.write(CONFIG)
        env = dict(os.environ)
        env.update(
            {"HOST": "127.0.0.1", "PORT": "0", "GRPC_HOST": "127.0.0.1", "GRPC_PORT": "0"}
        )
        env.update(extra_env or {})
        self.process = subprocess.Popen(
            [BINARY, "--config", self.dir.name, *extra_args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        found = {}

        def read():
            for line in self.process.stdout:
                match = LISTENING.search(line)
                if match:
                    found["grpc"] = match.group(1)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout=30)
        if "grpc" not in found:
            self.stop()
            raise RuntimeError("tollgate-rls did not say where it listens within 30 s")
        self.grpc = found["grpc"]
        self.channel = grpc.insecure_channel(self.grpc)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.stub = rls_pb2_grpc.RateLimitServiceStub(self.channel)

    def ask(self, domain, *descriptors, hits_addend=0):
        request = rls_pb2.RateLimitRequest(domain=domain, hits_addend=hits_addend)
        for entries in descriptors:
            d = request.descriptors.add()
            for key, value in entries:
                d.entries.add(key=key, value=value)
        return self.stub.ShouldRateLimit(request, timeout=10)

    def stop(self):
        if getattr(self, "channel", None) is not None:
            self.channel.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()
        self.dir.cleanup()


class ShouldRateLimit(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_twenty_a_minute_counts_down_then_is_over(self):
        # The Go service's integration expectation: remaining 20 - (i + 1), then
        # OVER_LIMIT from the 21st request on.
        for i in range(20):
            response = self.server.ask("python", [("user", "ann")])
            self.assertEqual(response.overall_code, rls_pb2.RateLimitResponse.OK)
            status = response.statuses[0]
            self.assertEqual(status.limit_remaining, 20 - (i + 1))
            self.assertEqual(status.current_limit.requests_per_unit, 20)
            self.assertEqual(
                status.current_limit.unit, rls_pb2.RateLimitResponse.RateLimit.MINUTE
            )
            self.assertTrue(0 < status.duration_until_reset.seconds <= 60)
        for _ in range(3):
            response = self.server.ask("python", [("user", "ann")])
            self.assertEqual(response.overall_code, rls_pb2.RateLimitResponse.OVER_LIMIT)
            self.assertEqual(response.statuses[0].limit_remaining, 0)

    def test_each_value_counts_apart(self):
        first = self.server.ask("python", [("user", "bob")])
        other = self.server.ask("python", [("user", "cy")])
        self.assertEqual(first.statuses[0].limit_remaining, 19)
        self.assertEqual(other.statuses[0].limit_remaining, 19)

    def test_unlimited_and_unmatched_descriptors_are_ok(self):
        response = self.server.ask("python", [("path", "/health")], [("nothing", "x")])
        self.assertEqual(response.overall_code, rls_pb2.RateLimitResponse.OK)
        self.assertEqual(len(response.statuses), 2)
        for status in response.statuses:
            self.assertEqual(status.code, rls_pb2.RateLimitResponse.OK)

    def test_an_unknown_domain_limits_nothing(self):
        response = self.server.ask("nowhere", [("user", "ann")])
        self.assertEqual(response.overall_code, rls_pb2.RateLimitResponse.OK)

    def test_a_wildcard_value_and_a_tollgate_algorithm(self):
        # `gold*` matches any value starting with gold; a token bucket of 3 an hour.
        for remaining in (2, 1, 0):
            response = self.server.ask("python", [("tier", "gold-42")])
            self.assertEqual(response.statuses[0].limit_remaining, remaining)
        response = self.server.ask("python", [("tier", "gold-42")])
        self.assertEqual(response.overall_code, rls_pb2.RateLimitResponse.OVER_LIMIT)

    def test_hits_addend_takes_several(self):
        response = self.server.ask("python", [("user", "dee")], hits_addend=5)
        self.assertEqual(response.statuses[0].limit_remaining, 15)

    def test_an_empty_domain_is_an_error(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.server.ask("", [("user", "ann")])
        self.assertIn("domain must not be empty", caught.exception.details())

    def test_no_descriptors_is_an_error(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.server.ask("python")
        self.assertIn("descriptor list must not be empty", caught.exception.details())


class Headers(unittest.TestCase):
    def test_ratelimit_headers_name_the_tightest_descriptor(self):
        server = Server({"LIMIT_RESPONSE_HEADERS_ENABLED": "true"})
        try:
            server.ask("python", [("user", "eve")], hits_addend=4)
            response = server.ask("python", [("user", "eve")], [("user", "fay")])
            headers = {h.key: h.value for h in response.response_headers_to_add}
            self.assertEqual(headers.get("RateLimit-Limit"), "20")
            self.assertEqual(headers.get("RateLimit-Remaining"), "15")
            self.assertIn("RateLimit-Reset", headers)
        finally:
            server.stop()


class RateLimitQuota(unittest.TestCase):
    """StreamRateLimitQuotas: a report per bucket, an assignment back, shares moving
    between two streams as Envoys sharing a bucket see them."""

    @staticmethod
    def report(user, allowed=1, seconds=0):
        usage = rlqs_pb2.RateLimitQuotaUsageReports.BucketQuotaUsage(
            bucket_id=rlqs_pb2.BucketId(bucket={"user": user}),
            num_requests_allowed=allowed,
        )
        usage.time_elapsed.seconds = seconds
        return rlqs_pb2.RateLimitQuotaUsageReports(domain="python", bucket_quota_usages=[usage])

    @staticmethod
    def tokens(response):
        self_actions = response.bucket_action
        assert len(self_actions) == 1, response
        action = self_actions[0].quota_assignment_action
        bucket = action.rate_limit_strategy.token_bucket
        return (
            bucket.max_tokens,
            bucket.tokens_per_fill.value,
            bucket.fill_interval.seconds,
            action.assignment_time_to_live.seconds,
        )

    def test_two_streams_share_a_bucket(self):
        server = Server()
        try:
            stub = rlqs_pb2_grpc.RateLimitQuotaServiceStub(server.channel)
            first, second = queue.Queue(), queue.Queue()
            a = stub.StreamRateLimitQuotas(iter(first.get, None), timeout=30)
            first.put(self.report("alice"))
            self.assertEqual(self.tokens(next(a)), (20, 20, 60, 15))
            b = stub.StreamRateLimitQuotas(iter(second.get, None), timeout=30)
            second.put(self.report("alice"))
            self.assertEqual(self.tokens(next(b)), (10, 10, 60, 15))
            self.assertEqual(self.tokens(next(a)), (10, 10, 60, 15))
            second.put(None)  # the second Envoy closes its side
            self.assertEqual(self.tokens(next(a)), (20, 20, 60, 15))
            first.put(None)
        finally:
            server.stop()

    def test_a_report_without_a_domain_is_invalid(self):
        server = Server()
        try:
            stub = rlqs_pb2_grpc.RateLimitQuotaServiceStub(server.channel)
            bad = self.report("alice")
            bad.domain = ""
            with self.assertRaises(grpc.RpcError) as caught:
                next(stub.StreamRateLimitQuotas(iter([bad]), timeout=30))
            self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        finally:
            server.stop()


REDIS = os.environ.get("TOLLGATE_TEST_REDIS")


@unittest.skipUnless(REDIS, "TOLLGATE_TEST_REDIS names no redis-server")
class RateLimitQuotaOverRedis(unittest.TestCase):
    """Two replicas over one Redis share a bucket through their leases: the
    assignments of their Envoys never add up to more than the limit."""

    @staticmethod
    def granted(response):
        (action,) = response.bucket_action
        strategy = action.quota_assignment_action.rate_limit_strategy
        if strategy.HasField("token_bucket"):
            return strategy.token_bucket.max_tokens
        if strategy.blanket_rule == strategy.DENY_ALL:
            return 0
        return None

    def test_two_replicas_share_a_bucket_through_redis(self):
        env = {"BACKEND_TYPE": "redis", "REDIS_URL": REDIS}
        args = ("--quota-sync-interval", "0s")
        a, b = Server(env, args), Server(env, args)
        try:
            reports = {"a": queue.Queue(), "b": queue.Queue()}
            streams = {
                name: rlqs_pb2_grpc.RateLimitQuotaServiceStub(server.channel).StreamRateLimitQuotas(
                    iter(reports[name].get, None), timeout=60
                )
                for name, server in (("a", a), ("b", b))
            }

            def ask(name, allowed, seconds):
                reports[name].put(RateLimitQuota.report("erin", allowed, seconds))
                return self.granted(next(streams[name]))

            self.assertEqual(ask("a", 1, 0), 20)  # alone: the whole limit
            self.assertEqual(ask("b", 1, 0), 0)  # a holds it all until its next report
            self.assertEqual(ask("a", 1, 5), 10)  # a comes down to its fair share
            self.assertEqual(ask("b", 10, 5), 10)  # and b takes the rest
            self.assertEqual(ask("a", 0, 5), 1)  # a quiet: a token
            self.assertEqual(ask("b", 10, 5), 19)
            reports["a"].put(None)  # a's Envoy leaves: its lease goes back
            for _ in range(200):
                if ask("b", 10, 5) == 20:
                    break
                time.sleep(0.02)
            else:
                self.fail("b never had the whole limit")
            reports["b"].put(None)
        finally:
            a.stop()
            b.stop()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: rls_grpcio_test.py PATH/TO/tollgate-rls")
    BINARY = sys.argv.pop(1)
    unittest.main(verbosity=2)
