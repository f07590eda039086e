"""Kafka's ``ConsumerGroupMetadata``: what a transactional producer needs of
a consumer to commit its offsets within a transaction (the consumer makes
it, the producer reads it; both import it from here)."""

__all__ = ["ConsumerGroupMetadata"]


class ConsumerGroupMetadata:
    """A consumer's group id, generation, member id and group instance id
    (``Consumer.group_metadata()``): given to
    ``Producer.send_offsets_to_transaction``, it lets the coordinator
    refuse offsets from a member the group has moved past (zombie
    fencing)."""

    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id")

    def __init__(self, group_id, generation_id=-1, member_id="", group_instance_id=None):
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id

    @classmethod
    def coerce(cls, group_metadata):
        """What ``send_offsets_to_transaction`` accepts: the metadata, or a
        group id string taken as the metadata of a consumer outside any
        generation.  Kafka's message when there is no group."""
        if isinstance(group_metadata, str):
            group_metadata = cls(group_metadata)
        if not group_metadata or not getattr(group_metadata, "group_id", None):
            raise ValueError("Consumer group metadata could not be null")
        return group_metadata

    def __eq__(self, other):
        return isinstance(other, ConsumerGroupMetadata) and (
            self.group_id, self.generation_id, self.member_id, self.group_instance_id) == (
            other.group_id, other.generation_id, other.member_id, other.group_instance_id)

    def __hash__(self):
        return hash((self.group_id, self.generation_id, self.member_id))

    def __repr__(self):
        return (f"GroupMetadata(groupId = {self.group_id}, generationId = "
                f"{self.generation_id}, memberId = {self.member_id}, groupInstanceId = "
                f"{self.group_instance_id or ''})")
