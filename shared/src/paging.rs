//! Following a listing page by page: the one loop every walk over a paged listing runs, the
//! service's over a catalog listing, the AWS catalog's over a DynamoDB query and the command
//! line's over the API's. It reads nothing itself (the caller's `read` does) and imports
//! nothing of the crate.

use std::future::Future;

/// One page of a listing and the cursor of the page after it (`None`: this is the last): a
/// name or commit ID for our listings, DynamoDB's last evaluated key for a query.
pub struct Page<T, C = String> {
    pub items: Vec<T>,
    pub next: Option<C>,
}

impl<T> Page<T> {
    /// A page of a catalog listing asked for at most `size` items: a full page may have more
    /// after it, from its last item's `cursor`; a shorter one is the last.
    pub fn of(items: Vec<T>, size: usize, cursor: impl FnOnce(&T) -> String) -> Self {
        let next = if items.len() == size {
            items.last().map(cursor)
        } else {
            None
        };
        Self { items, next }
    }
}

/// Reads the first page (`read(None)`), then each page from the cursor the one before it
/// gave, handing every page's items to `visit`, until `visit` finds what it looks for (its
/// `Some`, returned) or a page is the last (`None`).
///
/// # Errors
/// The first error `read` gives.
pub async fn walk<T, C, R, E, Fut>(
    mut read: impl FnMut(Option<C>) -> Fut,
    mut visit: impl FnMut(Vec<T>) -> Option<R>,
) -> Result<Option<R>, E>
where
    Fut: Future<Output = Result<Page<T, C>, E>>,
{
    let mut cursor = None;
    loop {
        let page = read(cursor).await?;
        if let Some(found) = visit(page.items) {
            return Ok(Some(found));
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(None),
        }
    }
}

/// Every item of a listing, in its order, page after page.
///
/// # Errors
/// The first error `read` gives.
pub async fn all<T, C, E, Fut>(read: impl FnMut(Option<C>) -> Fut) -> Result<Vec<T>, E>
where
    Fut: Future<Output = Result<Page<T, C>, E>>,
{
    let mut items = Vec::new();
    walk(read, |page| {
        items.extend(page);
        None::<()>
    })
    .await?;
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listing of 0..n read `size` at a time, as a catalog pages it.
    async fn listing(n: u32, size: usize, after: Option<String>) -> Result<Page<u32>, ()> {
        let from = after.map_or(0, |a| a.parse::<u32>().unwrap() + 1);
        let items: Vec<u32> = (from..n).take(size).collect();
        Ok(Page::of(items, size, |i| i.to_string()))
    }

    #[tokio::test]
    async fn every_item_is_read_once_in_order_whether_the_last_page_is_full_or_short() {
        for n in [0, 1, 3, 4, 7] {
            let read = all(|after| listing(n, 2, after)).await.unwrap();
            assert_eq!(read, (0..n).collect::<Vec<_>>(), "{n} items");
        }
    }

    #[tokio::test]
    async fn a_walk_stops_at_what_it_looks_for_and_reads_no_page_after_it() {
        let mut pages = 0;
        let found = walk(
            |after| {
                pages += 1;
                listing(100, 3, after)
            },
            |page| page.into_iter().find(|i| *i == 4),
        )
        .await;
        assert_eq!((found, pages), (Ok(Some(4)), 2));
        let missing = walk(|after| listing(5, 3, after), |_| None::<()>);
        assert_eq!(missing.await, Ok(None));
    }

    #[tokio::test]
    async fn a_failed_read_ends_the_walk_with_its_error() {
        let failed = all::<u32, String, _, _>(|after| async move {
            match after {
                None => Ok(Page::of(vec![0, 1], 2, |i| i.to_string())),
                Some(_) => Err("unavailable"),
            }
        });
        assert_eq!(failed.await, Err("unavailable"));
    }
}
