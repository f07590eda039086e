/*
 * KafkaProbe's Admin-method ops (see KafkaProbe's header), the oracle of
 * kchannel.Admin's differential tests: each prints Java Admin's result in
 * the plain JSON shape the Python side builds from kchannel.Admin's.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.TreeMap;
import java.util.TreeSet;

final class AdminOps {
    private static final ObjectMapper JSON = new ObjectMapper();

    private AdminOps() {
    }

    static void run(String op, Admin admin, JsonNode check, ObjectNode result) throws Exception {
        switch (op) {
            case "describeConfigs": {
                ConfigResource res = new ConfigResource(
                        ConfigResource.Type.valueOf(check.path("type").asText()),
                        check.path("name").asText());
                Config config = admin.describeConfigs(List.of(res)).all().get().get(res);
                ObjectNode configs = result.putObject("configs");
                for (ConfigEntry e : config.entries()) {
                    ArrayNode a = configs.putArray(e.name());
                    a.add(e.value());
                    a.add(e.source().name());
                    a.add(e.isReadOnly());
                    a.add(e.isSensitive());
                }
                break;
            }
            case "listOffsets": {
                String spec = check.path("spec").asText();
                OffsetSpec offsetSpec = spec.equals("earliest") ? OffsetSpec.earliest()
                        : spec.equals("latest") ? OffsetSpec.latest()
                        : spec.equals("maxTimestamp") ? OffsetSpec.maxTimestamp()
                        : OffsetSpec.forTimestamp(Long.parseLong(spec));
                Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
                for (JsonNode tp : check.path("partitions")) {
                    specs.put(tp(tp.asText()), offsetSpec);
                }
                ObjectNode offsets = result.putObject("offsets");
                for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e
                        : admin.listOffsets(specs).all().get().entrySet()) {
                    ArrayNode a = offsets.putArray(name(e.getKey()));
                    a.add(e.getValue().offset());
                    a.add(e.getValue().timestamp());
                    a.add(e.getValue().leaderEpoch().orElse(-1));
                }
                break;
            }
            case "deleteRecords": {
                Map<TopicPartition, RecordsToDelete> what = new HashMap<>();
                for (Map.Entry<String, JsonNode> e : check.path("offsets").properties()) {
                    what.put(tp(e.getKey()), RecordsToDelete.beforeOffset(e.getValue().asLong()));
                }
                ObjectNode lows = result.putObject("lowWatermarks");
                for (Map.Entry<TopicPartition, KafkaFuture<DeletedRecords>> e
                        : admin.deleteRecords(what).lowWatermarks().entrySet()) {
                    lows.put(name(e.getKey()), e.getValue().get().lowWatermark());
                }
                break;
            }
            case "createAcls": {
                List<AclBinding> bindings = new ArrayList<>();
                for (JsonNode b : check.path("bindings")) {
                    bindings.add(binding(b));
                }
                admin.createAcls(bindings).all().get();
                break;
            }
            case "describeAcls":
                putBindings(result, admin.describeAcls(filter(check.path("filter"))).values().get());
                break;
            case "deleteAcls": {
                List<AclBindingFilter> filters = new ArrayList<>();
                for (JsonNode f : check.path("filters")) {
                    filters.add(filter(f));
                }
                putBindings(result, admin.deleteAcls(filters).all().get());
                break;
            }
            case "describeLogDirs": {
                List<Integer> brokers = new ArrayList<>();
                for (JsonNode b : check.path("brokers")) {
                    brokers.add(b.asInt());
                }
                ObjectNode dirs = result.putObject("dirs");
                for (Map.Entry<Integer, Map<String, LogDirDescription>> b
                        : admin.describeLogDirs(brokers).allDescriptions().get().entrySet()) {
                    ObjectNode broker = dirs.putObject(b.getKey().toString());
                    for (Map.Entry<String, LogDirDescription> d : b.getValue().entrySet()) {
                        ObjectNode dir = broker.putObject(d.getKey());
                        LogDirDescription desc = d.getValue();
                        dir.put("error", desc.error() == null ? null
                                : desc.error().getClass().getSimpleName());
                        dir.put("totalBytes", desc.totalBytes().orElse(-1));
                        dir.put("usableBytes", desc.usableBytes().orElse(-1));
                        ObjectNode replicas = dir.putObject("replicas");
                        for (Map.Entry<TopicPartition, ReplicaInfo> r
                                : desc.replicaInfos().entrySet()) {
                            ArrayNode a = replicas.putArray(name(r.getKey()));
                            a.add(r.getValue().size());
                            a.add(r.getValue().offsetLag());
                            a.add(r.getValue().isFuture());
                        }
                    }
                }
                break;
            }
            case "describeProducers": {
                List<TopicPartition> tps = new ArrayList<>();
                for (JsonNode tp : check.path("partitions")) {
                    tps.add(tp(tp.asText()));
                }
                ObjectNode producers = result.putObject("producers");
                for (Map.Entry<TopicPartition, org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState> e
                        : admin.describeProducers(tps).all().get().entrySet()) {
                    ArrayNode list = producers.putArray(name(e.getKey()));
                    for (ProducerState s : e.getValue().activeProducers()) {
                        ArrayNode a = list.addArray();
                        a.add(s.producerId());
                        a.add(s.producerEpoch());
                        a.add(s.lastSequence());
                        a.add(s.lastTimestamp());
                        a.add(s.coordinatorEpoch().orElse(-1));
                        a.add(s.currentTransactionStartOffset().orElse(-1));
                    }
                }
                break;
            }
            case "listTransactions": {
                ListTransactionsOptions options = new ListTransactionsOptions();
                Set<TransactionState> states = new HashSet<>();
                for (JsonNode st : check.path("states")) {
                    states.add(TransactionState.parse(st.asText()));
                }
                options.filterStates(states);
                ArrayNode list = result.putArray("transactions");
                for (TransactionListing t : admin.listTransactions(options).all().get()) {
                    ArrayNode a = list.addArray();
                    a.add(t.transactionalId());
                    a.add(t.producerId());
                    a.add(t.state().toString());
                }
                break;
            }
            case "describeTransactions": {
                List<String> ids = new ArrayList<>();
                for (JsonNode id : check.path("ids")) {
                    ids.add(id.asText());
                }
                ObjectNode out = result.putObject("transactions");
                for (Map.Entry<String, TransactionDescription> e
                        : admin.describeTransactions(ids).all().get().entrySet()) {
                    TransactionDescription d = e.getValue();
                    ObjectNode t = out.putObject(e.getKey());
                    t.put("coordinatorId", d.coordinatorId());
                    t.put("state", d.state().toString());
                    t.put("producerId", d.producerId());
                    t.put("producerEpoch", d.producerEpoch());
                    t.put("timeoutMs", d.transactionTimeoutMs());
                    t.put("startTimeMs", d.transactionStartTimeMs().orElse(-1));
                    ArrayNode parts = t.putArray("partitions");
                    for (String tp : new TreeSet<>(names(d.topicPartitions()))) {
                        parts.add(tp);
                    }
                }
                break;
            }
            case "createTopics": {
                List<NewTopic> topics = new ArrayList<>();
                for (JsonNode t : check.path("topics")) {
                    Map<String, String> configs = new HashMap<>();
                    for (Map.Entry<String, JsonNode> c : t.path(3).properties()) {
                        configs.put(c.getKey(), c.getValue().asText());
                    }
                    topics.add(new NewTopic(t.get(0).asText(), t.get(1).asInt(),
                            (short) t.get(2).asInt()).configs(configs));
                }
                CreateTopicsOptions options = new CreateTopicsOptions()
                        .validateOnly(check.path("validateOnly").asBoolean(false));
                outcomes(result, admin.createTopics(topics, options).values());
                break;
            }
            case "deleteTopics": {
                List<String> names = new ArrayList<>();
                for (JsonNode n : check.path("topics")) {
                    names.add(n.asText());
                }
                outcomes(result, admin.deleteTopics(names).topicNameValues());
                break;
            }
            case "createPartitions": {
                Map<String, NewPartitions> counts = new HashMap<>();
                for (Map.Entry<String, JsonNode> e : check.path("counts").properties()) {
                    counts.put(e.getKey(), NewPartitions.increaseTo(e.getValue().asInt()));
                }
                CreatePartitionsOptions options = new CreatePartitionsOptions()
                        .validateOnly(check.path("validateOnly").asBoolean(false));
                outcomes(result, admin.createPartitions(counts, options).values());
                break;
            }
            case "listTopics": {
                ListTopicsOptions options = new ListTopicsOptions()
                        .listInternal(check.path("listInternal").asBoolean(false));
                ObjectNode topics = result.putObject("topics");
                for (TopicListing t : admin.listTopics(options).listings().get()) {
                    ArrayNode a = topics.putArray(t.name());
                    a.add(t.topicId().toString());
                    a.add(t.isInternal());
                }
                break;
            }
            case "describeTopics": {
                List<String> names = new ArrayList<>();
                for (JsonNode n : check.path("topics")) {
                    names.add(n.asText());
                }
                ObjectNode topics = result.putObject("topics");
                for (Map.Entry<String, KafkaFuture<TopicDescription>> e
                        : admin.describeTopics(names).topicNameValues().entrySet()) {
                    TopicDescription d;
                    try {
                        d = e.getValue().get();
                    } catch (ExecutionException ex) {
                        topics.put(e.getKey(), outcome(ex));
                        continue;
                    }
                    ObjectNode t = topics.putObject(e.getKey());
                    t.put("name", d.name());
                    t.put("internal", d.isInternal());
                    t.put("topicId", d.topicId().toString());
                    ArrayNode parts = t.putArray("partitions");
                    for (TopicPartitionInfo p : d.partitions()) {
                        ArrayNode a = parts.addArray();
                        a.add(p.partition());
                        a.add(p.leader() == null ? -1 : p.leader().id());
                        a.add(ids(p.replicas()));
                        a.add(ids(p.isr()));
                    }
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    // Per-name outcomes (the result's values()): "ok" or "Class: message".
    private static void outcomes(ObjectNode result, Map<String, ? extends KafkaFuture<?>> futures)
            throws InterruptedException {
        ObjectNode out = result.putObject("results");
        for (Map.Entry<String, ? extends KafkaFuture<?>> e : futures.entrySet()) {
            try {
                e.getValue().get();
                out.put(e.getKey(), "ok");
            } catch (ExecutionException ex) {
                out.put(e.getKey(), outcome(ex));
            }
        }
    }

    private static String outcome(ExecutionException ex) {
        Throwable cause = ex.getCause() == null ? ex : ex.getCause();
        return cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }

    private static ArrayNode ids(List<Node> nodes) {
        ArrayNode a = JSON.createArrayNode();
        for (Node n : nodes) {
            a.add(n.id());
        }
        return a;
    }

    private static TopicPartition tp(String text) {
        int colon = text.lastIndexOf(':');
        return new TopicPartition(text.substring(0, colon), Integer.parseInt(text.substring(colon + 1)));
    }

    private static String name(TopicPartition tp) {
        return tp.topic() + ":" + tp.partition();
    }

    private static List<String> names(Collection<TopicPartition> tps) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : tps) {
            out.add(name(tp));
        }
        return out;
    }

    private static String text(JsonNode n) {
        return n == null || n.isNull() ? null : n.asText();
    }

    private static AclBinding binding(JsonNode b) {
        return new AclBinding(
                new ResourcePattern(ResourceType.fromString(b.get(0).asText()), b.get(1).asText(),
                        PatternType.fromString(b.get(2).asText())),
                new AccessControlEntry(b.get(3).asText(), b.get(4).asText(),
                        AclOperation.fromString(b.get(5).asText()),
                        AclPermissionType.fromString(b.get(6).asText())));
    }

    private static AclBindingFilter filter(JsonNode f) {
        String rtype = text(f.get(0));
        String ptype = text(f.get(2));
        String op = text(f.get(5));
        String perm = text(f.get(6));
        return new AclBindingFilter(
                new ResourcePatternFilter(rtype == null ? ResourceType.ANY : ResourceType.fromString(rtype),
                        text(f.get(1)), ptype == null ? PatternType.ANY : PatternType.fromString(ptype)),
                new AccessControlEntryFilter(text(f.get(3)), text(f.get(4)),
                        op == null ? AclOperation.ANY : AclOperation.fromString(op),
                        perm == null ? AclPermissionType.ANY : AclPermissionType.fromString(perm)));
    }

    private static void putBindings(ObjectNode result, Collection<AclBinding> bindings) {
        Map<String, AclBinding> byKey = new TreeMap<>();
        for (AclBinding b : bindings) {
            byKey.put(b.toString(), b);
        }
        ArrayNode out = result.putArray("bindings");
        for (AclBinding b : byKey.values()) {
            ArrayNode a = out.addArray();
            a.add(b.pattern().resourceType().name());
            a.add(b.pattern().name());
            a.add(b.pattern().patternType().name());
            a.add(b.entry().principal());
            a.add(b.entry().host());
            a.add(b.entry().operation().name());
            a.add(b.entry().permissionType().name());
        }
    }
}
