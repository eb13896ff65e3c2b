//! The table's shape: keys, the two sparse indexes, TTL. Deployments create it with the SAM
//! template (`infra/template.yaml`, held to these names by a test); `create_table` makes the
//! same table on an emulator for tests and trials.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;

use super::describe_failure;
pub use super::items::{
    LISTING_INDEX, LISTING_PK, LISTING_SK, PK, SK, SWEEP_INDEX, SWEEP_PK, SWEEP_SK, TTL,
};

/// The table's key attributes and each index's, all strings: (index, partition, sort).
pub const INDEXES: [(&str, &str, &str); 2] = [
    (SWEEP_INDEX, SWEEP_PK, SWEEP_SK),
    (LISTING_INDEX, LISTING_PK, LISTING_SK),
];

fn key(name: &str, kind: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .expect("name and type are set")
}

fn string_attribute(name: &str) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .expect("name and type are set")
}

/// Creates the table (on-demand billing) with its indexes and TTL.
///
/// # Errors
/// The failed call, described.
pub async fn create_table(client: &Client, table: &str) -> Result<(), String> {
    let mut request = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(PK, KeyType::Hash))
        .key_schema(key(SK, KeyType::Range))
        .attribute_definitions(string_attribute(PK))
        .attribute_definitions(string_attribute(SK));
    for (index, partition, sort) in INDEXES {
        request = request
            .attribute_definitions(string_attribute(partition))
            .attribute_definitions(string_attribute(sort))
            .global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(index)
                    .key_schema(key(partition, KeyType::Hash))
                    .key_schema(key(sort, KeyType::Range))
                    .projection(
                        Projection::builder()
                            .projection_type(ProjectionType::All)
                            .build(),
                    )
                    .build()
                    .map_err(|e| e.to_string())?,
            );
    }
    request
        .send()
        .await
        .map_err(|e| describe_failure("CreateTable", &e))?;
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .attribute_name(TTL)
                .enabled(true)
                .build()
                .map_err(|e| e.to_string())?,
        )
        .send()
        .await
        .map_err(|e| describe_failure("UpdateTimeToLive", &e))?;
    Ok(())
}
