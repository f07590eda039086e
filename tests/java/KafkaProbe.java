/*
 * A test driver: Apache Kafka's Java client (kafka-clients AdminClient) and
 * Kafka's command-line tools, run against a server under test in one JVM.
 *
 * JVM start-up costs a second or two on a loaded machine, so one run performs
 * a whole list of checks.  Usage:
 *
 *     java -cp <kafka libs>/*:<classes> KafkaProbe SPEC.json
 *
 * SPEC.json is {"checks": [{"id": ..., "op": ..., ...}, ...]}.  For every
 * check one line "RESULT {json}" is printed to stdout with "id", "ok" and
 * either the op's result fields or "error" (the exception's simple class
 * name, after unwrapping ExecutionException) and "message".  A string value
 * "${otherId.field}" in a check is replaced by that field of an earlier
 * result, so a token created by one check can be renewed by the next.
 *
 * Ops (each takes "config": the AdminClient properties, except "tool"; with
 * "shared": true one Admin per config serves every such check):
 *   describeCluster                      -> clusterId, controller, nodes [[id, host, port]]
 *   createToken  [renewers, owner, maxLifetimeMs] -> token fields (hmac base64)
 *   describeTokens [owners]              -> tokens [token fields]
 *   renewToken hmac [renewPeriodMs]      -> expiry
 *   expireToken hmac [expiryTimePeriodMs] -> expiry
 *   describeScram [users] [untilDescribed [users]] -> users {name: [[mechanism, iterations]]};
 *                                            untilDescribed: described again (30 s at most)
 *                                            until each of those users has a credential (the
 *                                            broker replays an upsert a moment after it answered)
 *   alterScram upserts [{user, mechanism, iterations, password}],
 *              deletions [{user, mechanism}] -> results {user: "ok" | "Class: message"}
 *   repeatDescribeCluster durationMs intervalMs -> calls, failures (one client)
 *   tool main args                        -> exit, stdout, stderr: the tool's main()
 *                                            with Exit's procedures made to throw
 *   errorFlags (no config)               -> errors {code: [retriable, invalidMetadata]}:
 *                                            Errors' exception classes
 *   transactions topic transactionalId txns [[commit, [value...]]...]
 *                                        -> count: KafkaProducer (config: its properties)
 *                                            writes each transaction, committed or aborted
 * Admin methods for kchannel.Admin's differential tests (a partition is
 * "topic:partition"; an ACL binding or filter is [resourceType, name,
 * patternType, principal, host, operation, permissionType], enum names,
 * null for any):
 *   describeConfigs type name            -> configs {name: [value, source, readOnly, sensitive]}
 *   listOffsets partitions spec          -> offsets {tp: [offset, timestamp, leaderEpoch|-1]}
 *                                           (spec earliest|latest|maxTimestamp|<ms>)
 *   deleteRecords offsets {tp: offset}   -> lowWatermarks {tp: lowWatermark}
 *   createAcls bindings                  -> (ok)
 *   describeAcls filter                  -> bindings [binding], sorted
 *   deleteAcls filters                   -> bindings [deleted binding], sorted
 *   describeLogDirs brokers              -> dirs {broker: {path: {error, totalBytes, usableBytes,
 *                                           replicas {tp: [size, offsetLag, isFuture]}}}}
 *   describeProducers partitions         -> producers {tp: [[id, epoch, lastSequence,
 *                                           lastTimestamp, coordinatorEpoch|-1, txnStartOffset|-1]]}
 *   listTransactions [states]            -> transactions [[transactionalId, producerId, state]]
 *   describeTransactions ids             -> transactions {id: {coordinatorId, state, producerId,
 *                                           producerEpoch, timeoutMs, startTimeMs|-1, partitions}}
 *   createTopics topics [[name, partitions, replicationFactor, {config: value}]] [validateOnly]
 *                                        -> results {name: "ok" | "Class: message"} (values())
 *   deleteTopics topics                  -> results {name: "ok" | "Class: message"}
 *   createPartitions counts {topic: n} [validateOnly] -> results {topic: "ok" | "Class: message"}
 *   listTopics [listInternal]            -> topics {name: [topicId, internal]}
 *   describeTopics topics                -> topics {name: {name, internal, topicId, partitions
 *                                           [[partition, leader|-1, replicas, isr]]}
 *                                           | "Class: message"}
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateDelegationTokenOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeDelegationTokenOptions;
import org.apache.kafka.clients.admin.ExpireDelegationTokenOptions;
import org.apache.kafka.clients.admin.RenewDelegationTokenOptions;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.InvalidMetadataException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.security.token.delegation.TokenInformation;
import org.apache.kafka.common.utils.Exit;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class KafkaProbe {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern REF = Pattern.compile("\\$\\{([^.}]+)\\.([^}]+)\\}");
    private static final Map<String, JsonNode> RESULTS = new HashMap<>();
    private static final Map<String, Admin> SHARED = new HashMap<>();

    /** Thrown by Exit.exit/halt instead of ending the JVM. */
    static final class ExitCalled extends RuntimeException {
        final int status;

        ExitCalled(int status) {
            super("exit " + status);
            this.status = status;
        }
    }

    public static void main(String[] args) throws Exception {
        Exit.setExitProcedure((status, message) -> {
            throw new ExitCalled(status);
        });
        Exit.setHaltProcedure((status, message) -> {
            throw new ExitCalled(status);
        });
        JsonNode spec = JSON.readTree(new File(args[0]));
        PrintStream out = System.out;
        for (JsonNode check : spec.get("checks")) {
            JsonNode resolved = resolve(check);
            ObjectNode result = JSON.createObjectNode();
            result.put("id", resolved.path("id").asText());
            try {
                run(resolved, result);
                result.put("ok", true);
            } catch (Throwable t) {
                Throwable cause = t;
                while ((cause instanceof ExecutionException || cause instanceof InvocationTargetException)
                        && cause.getCause() != null) {
                    cause = cause.getCause();
                }
                result.put("ok", false);
                result.put("error", cause.getClass().getSimpleName());
                result.put("message", String.valueOf(cause.getMessage()));
            }
            RESULTS.put(result.get("id").asText(), result);
            out.println("RESULT " + JSON.writeValueAsString(result));
            out.flush();
        }
        System.exit(0);
    }

    private static JsonNode resolve(JsonNode node) {
        if (node.isTextual()) {
            Matcher m = REF.matcher(node.asText());
            if (m.matches()) {
                return field(m);
            }
            m.reset();
            StringBuilder text = new StringBuilder();
            while (m.find()) {
                m.appendReplacement(text, Matcher.quoteReplacement(field(m).asText()));
            }
            m.appendTail(text);
            return JSON.getNodeFactory().textNode(text.toString());
        }
        if (node.isArray()) {
            ArrayNode copy = JSON.createArrayNode();
            for (JsonNode item : node) {
                copy.add(resolve(item));
            }
            return copy;
        }
        if (node.isObject()) {
            ObjectNode copy = JSON.createObjectNode();
            for (Map.Entry<String, JsonNode> e : node.properties()) {
                copy.set(e.getKey(), resolve(e.getValue()));
            }
            return copy;
        }
        return node;
    }

    private static JsonNode field(Matcher m) {
        JsonNode earlier = RESULTS.get(m.group(1));
        if (earlier == null || !earlier.has(m.group(2))) {
            throw new IllegalArgumentException("no result field ${" + m.group(1) + "." + m.group(2) + "}");
        }
        return earlier.get(m.group(2));
    }

    private static Admin admin(JsonNode check) {
        Properties props = new Properties();
        for (Map.Entry<String, JsonNode> e : check.path("config").properties()) {
            props.put(e.getKey(), e.getValue().asText());
        }
        props.putIfAbsent("request.timeout.ms", "10000");
        props.putIfAbsent("default.api.timeout.ms", "20000");
        return Admin.create(props);
    }

    private static void run(JsonNode check, ObjectNode result) throws Exception {
        String op = check.path("op").asText();
        if (op.equals("tool")) {
            tool(check, result);
            return;
        }
        if (op.equals("errorFlags")) {
            errorFlags(result);
            return;
        }
        if (op.equals("transactions")) {
            transactions(check, result);
            return;
        }
        // "shared": true reuses one Admin per config for the JVM's life
        // (a TLS + SASL login per check costs seconds on a loaded machine).
        boolean shared = check.path("shared").asBoolean(false);
        Admin admin = shared ? SHARED.computeIfAbsent(check.path("config").toString(), k -> admin(check))
                : admin(check);
        try {
            switch (op) {
                case "describeCluster":
                    describeCluster(admin, result);
                    break;
                case "repeatDescribeCluster":
                    repeatDescribeCluster(admin, check, result);
                    break;
                case "createToken":
                    createToken(admin, check, result);
                    break;
                case "describeTokens":
                    describeTokens(admin, check, result);
                    break;
                case "renewToken": {
                    RenewDelegationTokenOptions options = new RenewDelegationTokenOptions();
                    if (check.has("renewPeriodMs")) {
                        options.renewTimePeriodMs(check.get("renewPeriodMs").asLong());
                    }
                    long expiry = admin.renewDelegationToken(hmac(check), options).expiryTimestamp().get();
                    result.put("expiry", expiry);
                    break;
                }
                case "expireToken": {
                    ExpireDelegationTokenOptions options = new ExpireDelegationTokenOptions();
                    if (check.has("expiryTimePeriodMs")) {
                        options.expiryTimePeriodMs(check.get("expiryTimePeriodMs").asLong());
                    }
                    long expiry = admin.expireDelegationToken(hmac(check), options).expiryTimestamp().get();
                    result.put("expiry", expiry);
                    break;
                }
                case "describeScram":
                    describeScram(admin, check, result);
                    break;
                case "alterScram":
                    alterScram(admin, check, result);
                    break;
                case "describeConfigs":
                case "listOffsets":
                case "deleteRecords":
                case "createAcls":
                case "describeAcls":
                case "deleteAcls":
                case "describeLogDirs":
                case "describeProducers":
                case "listTransactions":
                case "describeTransactions":
                case "createTopics":
                case "deleteTopics":
                case "createPartitions":
                case "listTopics":
                case "describeTopics":
                    AdminOps.run(op, admin, check, result);
                    break;
                default:
                    throw new IllegalArgumentException("unknown op " + op);
            }
        } finally {
            if (!shared) {
                admin.close();
            }
        }
    }

    private static void errorFlags(ObjectNode result) {
        ObjectNode errors = result.putObject("errors");
        for (Errors error : Errors.values()) {
            ApiException exception = error.exception();
            if (exception == null) {
                continue;
            }
            ArrayNode flags = errors.putArray(Integer.toString(error.code()));
            flags.add(exception instanceof RetriableException);
            flags.add(exception instanceof InvalidMetadataException);
        }
    }

    private static byte[] hmac(JsonNode check) {
        return Base64.getDecoder().decode(check.path("hmac").asText());
    }

    private static KafkaPrincipal principal(String text) {
        int colon = text.indexOf(':');
        return new KafkaPrincipal(text.substring(0, colon), text.substring(colon + 1));
    }

    private static void transactions(JsonNode check, ObjectNode result) throws Exception {
        Properties props = new Properties();
        for (Map.Entry<String, JsonNode> e : check.path("config").properties()) {
            props.put(e.getKey(), e.getValue().asText());
        }
        props.put("transactional.id", check.path("transactionalId").asText());
        props.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        props.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        String topic = check.path("topic").asText();
        int count = 0;
        try (org.apache.kafka.clients.producer.KafkaProducer<String, String> producer =
                 new org.apache.kafka.clients.producer.KafkaProducer<>(props)) {
            producer.initTransactions();
            for (JsonNode txn : check.path("txns")) {
                producer.beginTransaction();
                for (JsonNode value : txn.get(1)) {
                    producer.send(new org.apache.kafka.clients.producer.ProducerRecord<>(
                        topic, value.asText(), value.asText()));
                    count++;
                }
                producer.flush();
                if (txn.get(0).asBoolean()) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
            }
        }
        result.put("count", count);
    }

    private static void describeCluster(Admin admin, ObjectNode result) throws Exception {
        DescribeClusterResult cluster = admin.describeCluster();
        result.put("clusterId", cluster.clusterId().get());
        Node controller = cluster.controller().get();
        result.put("controller", controller == null ? -1 : controller.id());
        ArrayNode nodes = result.putArray("nodes");
        for (Node n : cluster.nodes().get()) {
            ArrayNode node = nodes.addArray();
            node.add(n.id());
            node.add(n.host());
            node.add(n.port());
        }
    }

    private static void repeatDescribeCluster(Admin admin, JsonNode check, ObjectNode result)
            throws InterruptedException {
        long deadline = System.currentTimeMillis() + check.path("durationMs").asLong(3000);
        long interval = check.path("intervalMs").asLong(200);
        int calls = 0;
        ArrayNode failures = result.putArray("failures");
        while (System.currentTimeMillis() < deadline) {
            try {
                admin.describeCluster().nodes().get();
                calls++;
            } catch (ExecutionException e) {
                failures.add(e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
            }
            Thread.sleep(interval);
        }
        result.put("calls", calls);
    }

    private static void putToken(ObjectNode out, DelegationToken token) {
        TokenInformation info = token.tokenInfo();
        out.put("tokenId", info.tokenId());
        out.put("hmac", Base64.getEncoder().encodeToString(token.hmac()));
        out.put("owner", info.owner().toString());
        out.put("requester", info.tokenRequester().toString());
        ArrayNode renewers = out.putArray("renewers");
        for (KafkaPrincipal p : info.renewers()) {
            renewers.add(p.toString());
        }
        out.put("issueTimestamp", info.issueTimestamp());
        out.put("expiryTimestamp", info.expiryTimestamp());
        out.put("maxTimestamp", info.maxTimestamp());
    }

    private static void createToken(Admin admin, JsonNode check, ObjectNode result) throws Exception {
        CreateDelegationTokenOptions options = new CreateDelegationTokenOptions();
        List<KafkaPrincipal> renewers = new ArrayList<>();
        for (JsonNode r : check.path("renewers")) {
            renewers.add(principal(r.asText()));
        }
        options.renewers(renewers);
        if (check.has("owner")) {
            options.owner(principal(check.get("owner").asText()));
        }
        if (check.has("maxLifetimeMs")) {
            options.maxLifetimeMs(check.get("maxLifetimeMs").asLong());
        }
        putToken(result, admin.createDelegationToken(options).delegationToken().get());
    }

    private static void describeTokens(Admin admin, JsonNode check, ObjectNode result) throws Exception {
        DescribeDelegationTokenOptions options = new DescribeDelegationTokenOptions();
        if (check.has("owners")) {
            List<KafkaPrincipal> owners = new ArrayList<>();
            for (JsonNode o : check.get("owners")) {
                owners.add(principal(o.asText()));
            }
            options.owners(owners);
        }
        ArrayNode tokens = result.putArray("tokens");
        for (DelegationToken token : admin.describeDelegationToken(options).delegationTokens().get()) {
            putToken(tokens.addObject(), token);
        }
    }

    private static void describeScram(Admin admin, JsonNode check, ObjectNode result) throws Exception {
        List<String> until = new ArrayList<>();
        for (JsonNode u : check.path("untilDescribed")) {
            until.add(u.asText());
        }
        long deadline = System.nanoTime() + 30_000_000_000L;
        Map<String, UserScramCredentialsDescription> described;
        while (true) {
            described = describeScramOnce(admin, check);
            boolean all = true;
            for (String user : until) {
                UserScramCredentialsDescription d = described.get(user);
                all &= d != null && !d.credentialInfos().isEmpty();
            }
            if (all || System.nanoTime() > deadline) {
                break;
            }
            Thread.sleep(50);
        }
        ObjectNode users = result.putObject("users");
        for (Map.Entry<String, UserScramCredentialsDescription> e : described.entrySet()) {
            ArrayNode infos = users.putArray(e.getKey());
            for (ScramCredentialInfo info : e.getValue().credentialInfos()) {
                ArrayNode pair = infos.addArray();
                pair.add(info.mechanism().mechanismName());
                pair.add(info.iterations());
            }
        }
    }

    private static Map<String, UserScramCredentialsDescription> describeScramOnce(
            Admin admin, JsonNode check) throws Exception {
        if (check.has("users")) {
            List<String> users = new ArrayList<>();
            for (JsonNode u : check.get("users")) {
                users.add(u.asText());
            }
            return admin.describeUserScramCredentials(users).all().get();
        }
        return admin.describeUserScramCredentials().all().get();
    }

    private static void alterScram(Admin admin, JsonNode check, ObjectNode result) throws Exception {
        List<UserScramCredentialAlteration> alterations = new ArrayList<>();
        for (JsonNode u : check.path("upserts")) {
            ScramMechanism mechanism = ScramMechanism.fromMechanismName(u.path("mechanism").asText());
            alterations.add(new UserScramCredentialUpsertion(u.path("user").asText(),
                    new ScramCredentialInfo(mechanism, u.path("iterations").asInt(4096)),
                    u.path("password").asText()));
        }
        for (JsonNode d : check.path("deletions")) {
            alterations.add(new UserScramCredentialDeletion(d.path("user").asText(),
                    ScramMechanism.fromMechanismName(d.path("mechanism").asText())));
        }
        ObjectNode results = result.putObject("results");
        for (Map.Entry<String, KafkaFuture<Void>> e
                : admin.alterUserScramCredentials(alterations).values().entrySet()) {
            try {
                e.getValue().get();
                results.put(e.getKey(), "ok");
            } catch (ExecutionException ex) {
                results.put(e.getKey(), ex.getCause().getClass().getSimpleName() + ": "
                        + ex.getCause().getMessage());
            }
        }
    }

    /** A tool's main() in this JVM; its System.out/err (and Scala's Console) captured. */
    private static void tool(JsonNode check, ObjectNode result) throws Exception {
        Class<?> cls = Class.forName(check.path("main").asText());
        List<String> argList = new ArrayList<>();
        for (JsonNode a : check.path("args")) {
            argList.add(a.asText());
        }
        String[] args = argList.toArray(new String[0]);
        Method main = cls.getMethod("main", String[].class);
        ByteArrayOutputStream outBytes = new ByteArrayOutputStream();
        ByteArrayOutputStream errBytes = new ByteArrayOutputStream();
        PrintStream savedOut = System.out;
        PrintStream savedErr = System.err;
        PrintStream out = new PrintStream(outBytes, true, StandardCharsets.UTF_8);
        PrintStream err = new PrintStream(errBytes, true, StandardCharsets.UTF_8);
        int status = 0;
        System.setOut(out);
        System.setErr(err);
        try {
            // Scala's println writes to Console.out, bound when Console was
            // first used: rebind it too (ConfigCommand is Scala).
            scala.Console$.MODULE$.withOut(out, (scala.Function0<Object>) () ->
                scala.Console$.MODULE$.withErr(err, (scala.Function0<Object>) () -> {
                    try {
                        main.invoke(null, (Object) args);
                    } catch (InvocationTargetException e) {
                        if (e.getCause() instanceof ExitCalled) {
                            throw (ExitCalled) e.getCause();
                        }
                        throw new RuntimeException(e.getCause());
                    } catch (IllegalAccessException e) {
                        throw new RuntimeException(e);
                    }
                    return null;
                }));
        } catch (ExitCalled e) {
            status = e.status;
        } finally {
            System.setOut(savedOut);
            System.setErr(savedErr);
        }
        result.put("exit", status);
        result.put("stdout", outBytes.toString(StandardCharsets.UTF_8));
        result.put("stderr", errBytes.toString(StandardCharsets.UTF_8));
    }
}
